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

#[test]
fn openai_strict_requires_everything_and_makes_optional_nullable() {
    let strict = openai_strict(&tool_schema());
    let args = arguments(&strict);
    assert_eq!(args["additionalProperties"], false);
    let mut required: Vec<&str> = args["required"]
        .as_array()
        .expect("required")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    required.sort_unstable();
    assert_eq!(required, ["issue", "mode", "path", "pattern"]);
    assert_eq!(args["properties"]["pattern"]["type"], "string");
    assert_eq!(args["properties"]["path"]["type"], json!(["string", "null"]));
    assert_eq!(args["properties"]["issue"]["type"], json!(["integer", "null"]));
    assert_eq!(args["properties"]["issue"]["minimum"], 1);
    assert_eq!(args["properties"]["mode"]["enum"], json!(["a", "b", null]));
    // Not supported in strict mode: moved into the description.
    assert!(args["properties"]["pattern"].get("maxLength").is_none());
    assert_eq!(args["properties"]["pattern"]["description"], "regex (maxLength: 200)");
    assert_eq!(strict["additionalProperties"], false);
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
