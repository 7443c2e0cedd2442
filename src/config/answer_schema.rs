//! Structured answers: a sub-agent's `complete_task.answer` checked against its JSON schema, and
//! the reviewer's verdict read from it.
//!
//! A structured answer is model output: it may be an object, a string holding one, or neither,
//! with properties missing, mistyped or added. [`AnswerSchema::check`] accepts exactly what the
//! schema allows (after one normalisation that cannot change meaning: optional properties sent
//! as `null`, which is how strict structured output spells "absent"), and otherwise returns a
//! message, sent back to the sub-agent, that names each mismatch. [`read_verdict`] then bounds
//! what a verdict may carry into prompts, events and pull request bodies.

use serde_json::{Map, Value, json};

/// Mismatches named in one message to the sub-agent.
const MAX_REPORTED_ERRORS: usize = 5;
/// Findings kept from one verdict.
pub(crate) const MAX_FINDINGS: usize = 20;
/// Characters kept of one finding.
const MAX_FINDING_CHARS: usize = 1_000;

/// A compiled output schema.
pub(crate) struct AnswerSchema {
    schema: Value,
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for AnswerSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnswerSchema")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl AnswerSchema {
    /// Compiles `schema`; the error says why it is not a usable JSON schema.
    pub(crate) fn compile(schema: &Value) -> Result<Self, String> {
        let validator = jsonschema::validator_for(schema).map_err(|error| error.to_string())?;
        Ok(Self {
            schema: schema.clone(),
            validator,
        })
    }

    pub(crate) fn schema(&self) -> &Value {
        &self.schema
    }

    /// The answer as the schema allows it, or what to fix.
    pub(crate) fn check(&self, answer: &Value) -> Result<Value, String> {
        let mut answer = match answer {
            // Without structured output, models often send the object as a JSON string.
            Value::String(text) => serde_json::from_str::<Value>(text.trim()).map_err(|error| {
                format!("`answer` must be a JSON object matching the output schema; it is a string that is not JSON ({error})")
            })?,
            other => other.clone(),
        };
        drop_null_optionals(&mut answer, &self.schema);
        let problems: Vec<String> = self
            .validator
            .iter_errors(&answer)
            .take(MAX_REPORTED_ERRORS)
            .map(|error| {
                let at = error.instance_path().as_str().to_owned();
                let at = if at.is_empty() {
                    "the answer".to_owned()
                } else {
                    format!("`{at}`")
                };
                format!("{at}: {error}")
            })
            .collect();
        if problems.is_empty() {
            Ok(answer)
        } else {
            Err(format!(
                "`answer` does not match the output schema: {}. Call complete_task again with an answer that matches it.",
                problems.join("; ")
            ))
        }
    }
}

/// Whether a property's schema lets it be `null`.
fn allows_null(schema: Option<&Value>) -> bool {
    match schema.and_then(|schema| schema.get("type")) {
        Some(Value::String(kind)) => kind == "null",
        Some(Value::Array(kinds)) => kinds.iter().any(|kind| kind == "null"),
        _ => false,
    }
}

/// Drops object properties that are `null`, not required and not allowed to be `null`, at every
/// level the schema describes (properties and array items).
fn drop_null_optionals(value: &mut Value, schema: &Value) {
    match value {
        Value::Object(map) => {
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|names| names.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let properties = schema.get("properties").and_then(Value::as_object);
            let property = |name: &str| properties.and_then(|properties| properties.get(name));
            map.retain(|name, value| {
                !(value.is_null() && !required.contains(&name.as_str()) && !allows_null(property(name)))
            });
            for (name, value) in map.iter_mut() {
                if let Some(schema) = property(name) {
                    drop_null_optionals(value, schema);
                }
            }
        }
        Value::Array(items) => {
            if let Some(schema) = schema.get("items") {
                for item in items {
                    drop_null_optionals(item, schema);
                }
            }
        }
        _ => {}
    }
}

/// The reviewer's answer: `{"verdict": "pass"|"fail", "findings": ["...", ...]}`.
pub(crate) fn verdict_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "verdict": {"type": "string", "enum": ["pass", "fail"], "description": "pass when the change may be proposed as it is, fail when it must be fixed first"},
            "findings": {"type": "array", "items": {"type": "string"}, "description": "one entry per problem: file, line, what is wrong, what to do; empty on pass"},
        },
        "required": ["verdict", "findings"],
        "additionalProperties": false,
    })
}

/// A reviewer's verdict, bounded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Verdict {
    pub pass: bool,
    pub findings: Vec<String>,
}

impl Verdict {
    pub(crate) fn as_str(&self) -> &'static str {
        if self.pass { "pass" } else { "fail" }
    }
}

/// Reads a verdict from an answer that passed [`verdict_schema`]; the error says what is wrong
/// with one that did not (defence in depth: the reviewer definition always carries the schema).
pub(crate) fn read_verdict(answer: &Value) -> Result<Verdict, String> {
    let object: &Map<String, Value> = answer.as_object().ok_or("the verdict is not a JSON object")?;
    let pass = match object.get("verdict").and_then(Value::as_str) {
        Some("pass") => true,
        Some("fail") => false,
        _ => return Err("`verdict` must be \"pass\" or \"fail\"".into()),
    };
    let findings = object
        .get("findings")
        .and_then(Value::as_array)
        .ok_or("`findings` must be an array of strings")?
        .iter()
        .filter_map(Value::as_str)
        .map(|finding| {
            let flat = finding.split_whitespace().collect::<Vec<_>>().join(" ");
            crate::text::marked(crate::text::prefix_chars(&flat, MAX_FINDING_CHARS), "…")
        })
        .filter(|finding| !finding.is_empty())
        .take(MAX_FINDINGS)
        .collect();
    Ok(Verdict { pass, findings })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> AnswerSchema {
        AnswerSchema::compile(&json!({
            "type": "object",
            "properties": {
                "summary": {"type": "string"},
                "files": {"type": "array", "items": {"type": "object", "properties": {"path": {"type": "string"}, "note": {"type": "string"}}, "required": ["path"]}},
            },
            "required": ["summary"],
        }))
        .expect("compiles")
    }

    #[test]
    fn a_matching_answer_passes_and_null_optionals_are_dropped() {
        let answer = json!({"summary": "ok", "files": [{"path": "a.rs", "note": null}]});
        assert_eq!(
            schema().check(&answer),
            Ok(json!({"summary": "ok", "files": [{"path": "a.rs"}]}))
        );
        assert_eq!(
            schema().check(&json!({"summary": "ok", "files": null})),
            Ok(json!({"summary": "ok"}))
        );
        // The object as a JSON string, as a model without structured output sends it.
        assert_eq!(
            schema().check(&json!("{\"summary\": \"s\"}")),
            Ok(json!({"summary": "s"}))
        );
    }

    #[test]
    fn a_mismatch_names_where_and_what() {
        let error = schema().check(&json!({"summary": 5})).expect_err("wrong type");
        assert!(error.contains("/summary") && error.contains("string"), "{error}");
        let error = schema().check(&json!({"files": []})).expect_err("missing");
        assert!(error.contains("summary"), "{error}");
        // A required property sent as null is a mismatch, not an absence.
        assert!(schema().check(&json!({"summary": null})).is_err());
        let error = schema()
            .check(&json!("not json"))
            .expect_err("a string that is not JSON");
        assert!(error.contains("not JSON"), "{error}");
    }

    #[test]
    fn verdicts_are_read_and_bounded() {
        let verdicts = AnswerSchema::compile(&verdict_schema()).expect("compiles");
        assert!(verdicts.check(&json!({"verdict": "maybe", "findings": []})).is_err());
        assert!(verdicts.check(&json!({"verdict": "pass"})).is_err());
        assert!(
            verdicts
                .check(&json!({"verdict": "pass", "findings": [], "extra": 1}))
                .is_err()
        );
        let many: Vec<String> = (0..50).map(|i| format!("finding {i}\n# heading")).collect();
        let verdict = read_verdict(&json!({"verdict": "fail", "findings": many})).expect("reads");
        assert!(!verdict.pass);
        assert_eq!(verdict.findings.len(), MAX_FINDINGS);
        assert_eq!(verdict.findings[0], "finding 0 # heading", "one line each");
        let long = "x".repeat(5_000);
        let verdict = read_verdict(&json!({"verdict": "fail", "findings": [long]})).expect("reads");
        assert!(verdict.findings[0].chars().count() <= MAX_FINDING_CHARS + 1);
        assert!(read_verdict(&json!({"verdict": "pass", "findings": "none"})).is_err());
    }
}
