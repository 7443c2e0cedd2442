//! What the model is told about each tool, in one place: name, description, argument schema and
//! class. The system prompt, the `upkeep tools` listing and the structured-output schema sent to
//! providers are all rendered from these specs, so they can never disagree; a tool's argument
//! schema is generated from the struct its call reads ([`super::args::schema_for`]).

use serde::Serialize;
use serde_json::{Value, json};

/// Safe tools are always offered; dangerous ones only with `--allow-dangerous-tools` (or, for
/// declared command tools, `--allow-tool NAME`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolClass {
    Safe,
    Dangerous,
}

#[derive(Debug, Clone, Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub class: ToolClass,
    pub description: String,
    /// JSON schema (an object schema) of the `arguments` object.
    pub parameters: Value,
}

impl ToolSpec {
    pub fn new(name: &str, class: ToolClass, description: &str, parameters: Value) -> Self {
        Self {
            name: name.to_owned(),
            class,
            description: description.to_owned(),
            parameters,
        }
    }
}

/// Builds a flat object schema from `(name, type, description, required)` rows, for specs
/// written by hand outside upkeep's own tools (tests of the providers); upkeep's tools generate
/// theirs from their argument structs.
pub fn object_schema(properties: &[(&str, &str, &str, bool)]) -> Value {
    let mut props = serde_json::Map::new();
    let mut required = Vec::new();
    for (name, ty, description, is_required) in properties {
        props.insert((*name).to_owned(), json!({"type": ty, "description": description}));
        if *is_required {
            required.push(*name);
        }
    }
    json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
}

/// The JSON schema of a whole reply `{plan, tool_calls}`: each tool call is one branch of an
/// `anyOf` that pins `tool_name` to one enabled tool and `arguments` to its schema. A tool that
/// is not enabled has no branch, so a provider enforcing the schema cannot even produce it. A
/// reply makes at least one call (`minItems`), as the parser demands.
pub fn reply_schema(specs: &[ToolSpec]) -> Value {
    let branches: Vec<Value> = specs
        .iter()
        .map(|spec| {
            json!({
                "type": "object",
                "properties": {
                    "tool_name": {"type": "string", "enum": [spec.name]},
                    "arguments": spec.parameters,
                },
                "required": ["tool_name", "arguments"],
                "additionalProperties": false,
            })
        })
        .collect();
    json!({
        "type": "object",
        "properties": {
            "plan": {"type": "string", "description": "short step-by-step plan"},
            "tool_calls": {"type": "array", "items": {"anyOf": branches}, "minItems": 1},
        },
        "required": ["plan", "tool_calls"],
        "additionalProperties": false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_schema_has_one_branch_per_tool() {
        let specs = vec![
            ToolSpec::new(
                "a",
                ToolClass::Safe,
                "A",
                object_schema(&[("path", "string", "p", true)]),
            ),
            ToolSpec::new("b", ToolClass::Safe, "B", object_schema(&[])),
        ];
        let schema = reply_schema(&specs);
        let branches = schema["properties"]["tool_calls"]["items"]["anyOf"]
            .as_array()
            .expect("anyOf is an array");
        assert_eq!(branches.len(), 2);
        assert_eq!(branches[0]["properties"]["tool_name"]["enum"][0], "a");
        assert_eq!(branches[0]["properties"]["arguments"]["required"][0], "path");
    }

    /// The parser refuses a reply without calls; the schema a server enforces must too.
    #[test]
    fn reply_schema_refuses_a_reply_without_calls() {
        let specs = vec![ToolSpec::new("b", ToolClass::Safe, "B", object_schema(&[]))];
        let validator = jsonschema::validator_for(&reply_schema(&specs)).expect("a valid schema");
        let empty = serde_json::json!({"plan": "nothing", "tool_calls": []});
        assert!(!validator.is_valid(&empty), "the schema allows a reply without calls");
        let one = serde_json::json!({"plan": "b", "tool_calls": [{"tool_name": "b", "arguments": {}}]});
        assert!(validator.is_valid(&one));
    }
}
