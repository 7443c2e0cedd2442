//! The reply schema in each provider's dialect, and what to do when a server refuses it.
//!
//! `tools::spec::reply_schema` writes one plain JSON schema. No API accepts all of JSON Schema
//! for structured output, and each refuses a different part of it: OpenAI wants closed objects
//! and no string length bounds; Anthropic refuses numeric and length bounds; Gemini accepts a
//! fixed list of keywords. The transforms here keep what a dialect enforces and turn the bounds
//! it cannot enforce into words in the property's `description`, so the model still reads them
//! and the tools still validate them on arrival.
//!
//! Optional arguments stay optional in every dialect. OpenAI's strict mode would make every
//! property required and the optional ones nullable, and servers that enforce the schema with a
//! grammar then make the model write every optional argument (an `issue`, review `replies`)
//! on every call, filled with whatever it invents; so upkeep sends OpenAI's schema with
//! `strict: false` (see docs/decisions.md).
//!
//! Some servers (older models, OpenAI-compatible local servers) refuse structured output
//! altogether. [`super::reply_form::StructuredOutput`] remembers that for the rest of the run, so the provider
//! falls back to JSON in plain text (read by the agent's lenient parser) instead of failing
//! every call.

use serde_json::{Map, Value, json};

/// Bounds worth telling the model about when a dialect cannot enforce them.
const HINTED: &[&str] = &[
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
];

/// Keywords whose values are schemas, keyed by name (`properties`) or listed (`anyOf`).
const SCHEMA_MAPS: &[&str] = &["properties", "$defs", "definitions"];
const SCHEMA_LISTS: &[&str] = &["anyOf", "oneOf", "allOf", "prefixItems"];

/// What one API accepts.
struct Dialect {
    /// Keywords passed through (after their sub-schemas are transformed).
    keep: &'static [&'static str],
    /// Every object gets `additionalProperties: false`.
    close_objects: bool,
    /// `const` is rewritten as a one-value `enum`.
    const_as_enum: bool,
    /// The largest `minItems` kept.
    max_min_items: Option<u64>,
    /// The string formats kept; `None` keeps any format the `keep` list allows.
    formats: Option<&'static [&'static str]>,
}

/// OpenAI Structured Outputs ("Supported schemas" in the guide): root object,
/// `additionalProperties: false`; no `allOf`, `not`, `if`/`then`/`else`, and no string length
/// bounds. Sent with `strict: false`, so `required` lists only the required properties.
const OPENAI: Dialect = Dialect {
    keep: &[
        "type",
        "description",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "enum",
        "const",
        "$defs",
        "$ref",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    ],
    close_objects: true,
    const_as_enum: false,
    max_min_items: None,
    formats: None,
};

/// Anthropic structured outputs: `additionalProperties: false` required on every object; no
/// numeric bounds, no length bounds, `minItems` only 0 or 1, a fixed list of formats. Regex
/// `pattern` is only partly supported (no lookaround, backreferences or `\b`), and patterns come
/// from operators' declared tools, so they travel as hints rather than risk a 400 on every call.
const ANTHROPIC: Dialect = Dialect {
    keep: &[
        "type",
        "description",
        "title",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "allOf",
        "enum",
        "const",
        "default",
        "$defs",
        "$ref",
        "definitions",
        "format",
        "minItems",
    ],
    close_objects: true,
    const_as_enum: false,
    max_min_items: Some(1),
    formats: Some(&[
        "date-time",
        "time",
        "date",
        "duration",
        "email",
        "hostname",
        "uri",
        "ipv4",
        "ipv6",
        "uuid",
    ]),
};

/// Gemini `responseJsonSchema`: the API documents the exact list of keywords it supports.
const GEMINI: Dialect = Dialect {
    keep: &[
        "$id",
        "$defs",
        "$ref",
        "$anchor",
        "type",
        "format",
        "title",
        "description",
        "enum",
        "items",
        "prefixItems",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "anyOf",
        "oneOf",
        "properties",
        "additionalProperties",
        "required",
        "propertyOrdering",
    ],
    close_objects: false,
    const_as_enum: true,
    max_min_items: None,
    formats: None,
};

/// Ollama's `format` is compiled into a sampling grammar; types, enums, `anyOf` and required
/// properties are what that grammar reliably supports, so bounds travel as hints.
const OLLAMA: Dialect = Dialect {
    keep: &[
        "type",
        "description",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "enum",
        "const",
    ],
    close_objects: true,
    const_as_enum: false,
    max_min_items: None,
    formats: None,
};

/// The schema for OpenAI's `response_format` (sent with `strict: false`).
pub(crate) fn openai(schema: &Value) -> Value {
    transform(schema, &OPENAI)
}

/// The schema for Anthropic's `output_config.format`.
pub(crate) fn anthropic(schema: &Value) -> Value {
    transform(schema, &ANTHROPIC)
}

/// The schema for Gemini's `generationConfig.responseJsonSchema`.
pub(crate) fn gemini(schema: &Value) -> Value {
    transform(schema, &GEMINI)
}

/// The schema for Ollama's `format`.
pub(crate) fn ollama(schema: &Value) -> Value {
    transform(schema, &OLLAMA)
}

fn transform(node: &Value, dialect: &Dialect) -> Value {
    let Some(object) = node.as_object() else {
        // `true`/`false` schemas and anything stranger pass through untouched.
        return node.clone();
    };
    let mut out = Map::new();
    let mut hints = Vec::new();
    for (key, value) in object {
        let key = key.as_str();
        let kept = dialect.keep.contains(&key);
        match key {
            _ if SCHEMA_MAPS.contains(&key) && kept => {
                let map = value.as_object().map(|entries| {
                    entries
                        .iter()
                        .map(|(name, schema)| (name.clone(), transform(schema, dialect)))
                        .collect::<Map<_, _>>()
                });
                out.insert(key.to_owned(), map.map_or_else(|| value.clone(), Value::Object));
            }
            _ if SCHEMA_LISTS.contains(&key) && kept => {
                out.insert(key.to_owned(), transform_list(value, dialect));
            }
            "items" if kept => {
                let items = match value {
                    Value::Array(_) => transform_list(value, dialect),
                    other => transform(other, dialect),
                };
                out.insert(key.to_owned(), items);
            }
            "additionalProperties" if kept && !dialect.close_objects => {
                out.insert(key.to_owned(), transform(value, dialect));
            }
            // Set below for every object.
            "additionalProperties" if dialect.close_objects => {}
            "const" if dialect.const_as_enum && !out.contains_key("enum") => {
                out.insert("enum".to_owned(), json!([value]));
            }
            "minItems" if kept => match dialect.max_min_items {
                Some(max) if value.as_u64().is_none_or(|n| n > max) => {
                    hints.push(format!("{key}: {value}"));
                }
                _ => {
                    out.insert(key.to_owned(), value.clone());
                }
            },
            "format" if kept => match dialect.formats {
                Some(allowed) if !value.as_str().is_some_and(|f| allowed.contains(&f)) => {
                    hints.push(format!("{key}: {value}"));
                }
                _ => {
                    out.insert(key.to_owned(), value.clone());
                }
            },
            _ if kept => {
                out.insert(key.to_owned(), value.clone());
            }
            _ if HINTED.contains(&key) => hints.push(format!("{key}: {value}")),
            // Annotations (`default`, `examples`, `$schema`, ...) the dialect refuses.
            _ => {}
        }
    }
    if !hints.is_empty() {
        let described = match out.get("description").and_then(Value::as_str) {
            Some(text) if !text.is_empty() => format!("{text} ({})", hints.join(", ")),
            _ => format!("({})", hints.join(", ")),
        };
        out.insert("description".to_owned(), Value::String(described));
    }
    let is_object = out.get("type").and_then(Value::as_str) == Some("object") || out.contains_key("properties");
    if is_object && dialect.close_objects {
        out.insert("additionalProperties".to_owned(), Value::Bool(false));
    }
    Value::Object(out)
}

fn transform_list(value: &Value, dialect: &Dialect) -> Value {
    match value.as_array() {
        Some(items) => Value::Array(items.iter().map(|item| transform(item, dialect)).collect()),
        None => value.clone(),
    }
}

#[cfg(test)]
#[path = "schema_tests.rs"]
mod tests;
