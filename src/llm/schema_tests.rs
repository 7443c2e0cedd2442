use super::*;

fn tool_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "plan": {"type": "string"},
            "tool_calls": {"type": "array", "items": {"anyOf": [{
                "type": "object",
                "properties": {
                    "tool_name": {"type": "string", "enum": ["search_files"]},
                    "arguments": {
                        "type": "object",
                        "properties": {
                            "pattern": {"type": "string", "maxLength": 200, "description": "regex"},
                            "path": {"type": "string"},
                            "issue": {"type": "integer", "minimum": 1},
                            "mode": {"type": "string", "enum": ["a", "b"]}
                        },
                        "required": ["pattern"]
                    }
                },
                "required": ["tool_name", "arguments"]
            }]}}
        },
        "required": ["plan", "tool_calls"]
    })
}

fn arguments(schema: &Value) -> &Value {
    &schema["properties"]["tool_calls"]["items"]["anyOf"][0]["properties"]["arguments"]
}

/// Optional arguments stay optional: a server enforcing the schema must not make the model
/// write them on every call.
#[test]
fn openai_keeps_optional_arguments_optional_and_closes_objects() {
    let schema = openai(&tool_schema());
    let args = arguments(&schema);
    assert_eq!(args["additionalProperties"], false);
    assert_eq!(args["required"], json!(["pattern"]));
    assert_eq!(args["properties"]["path"]["type"], "string");
    assert_eq!(args["properties"]["issue"]["type"], "integer");
    assert_eq!(args["properties"]["issue"]["minimum"], 1);
    assert_eq!(args["properties"]["mode"]["enum"], json!(["a", "b"]));
    // Not supported by OpenAI: moved into the description.
    assert!(args["properties"]["pattern"].get("maxLength").is_none());
    assert_eq!(args["properties"]["pattern"]["description"], "regex (maxLength: 200)");
    assert_eq!(schema["additionalProperties"], false);
}

#[test]
fn anthropic_drops_bounds_and_closes_objects() {
    let schema = anthropic(&tool_schema());
    let args = arguments(&schema);
    assert_eq!(args["additionalProperties"], false);
    assert_eq!(args["required"], json!(["pattern"]));
    assert!(args["properties"]["issue"].get("minimum").is_none());
    assert_eq!(args["properties"]["issue"]["description"], "(minimum: 1)");
    assert_eq!(args["properties"]["path"]["type"], "string");
}

#[test]
fn gemini_keeps_only_documented_keywords() {
    let schema = gemini(&json!({
        "type": "object",
        "properties": {"a": {"const": "x", "pattern": "^x$", "default": "x"}},
        "additionalProperties": false
    }));
    assert_eq!(
        schema["properties"]["a"],
        json!({"enum": ["x"], "description": "(pattern: \"^x$\")"})
    );
    assert_eq!(schema["additionalProperties"], false);
}
