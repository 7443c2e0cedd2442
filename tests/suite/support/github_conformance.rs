//! GitHub's published REST description, as JSON Schema: `tests/conformance/github/schemas.json`
//! (written by `trim.py` beside it from the OpenAPI description). Every body the GitHub fake
//! serves and every request body upkeep sends it is validated here.

use std::sync::OnceLock;

use serde_json::{Value, json};

fn schemas() -> &'static Value {
    static SCHEMAS: OnceLock<Value> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/conformance/github/schemas.json");
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        serde_json::from_str(&text).expect("schemas.json is JSON")
    })
}

/// Which body of an operation.
#[derive(Debug, Clone, Copy)]
pub enum Body<'a> {
    Request,
    Response(&'a str),
}

/// The operation (`"GET /repos/{owner}/{repo}/pulls"`) a request is for, from its method and
/// path, or `None` when it is none of those described.
pub fn operation(method: &str, path: &str) -> Option<String> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let operations = schemas()["operations"].as_object().expect("operations");
    operations.keys().find_map(|key| {
        let (verb, template) = key.split_once(' ')?;
        let parts: Vec<&str> = template.trim_matches('/').split('/').collect();
        let matches = verb.eq_ignore_ascii_case(method)
            && parts.len() == segments.len()
            && parts
                .iter()
                .zip(&segments)
                .all(|(part, segment)| part.starts_with('{') || part == segment);
        matches.then(|| key.clone())
    })
}

/// Validates `value` as the given body of `operation`; the errors say where and why.
pub fn validate(operation: &str, body: Body<'_>, value: &Value) -> Result<(), Vec<String>> {
    let described = &schemas()["operations"][operation];
    assert!(
        described.is_object(),
        "{operation} is not in schemas.json (run trim.py)"
    );
    let schema = match body {
        Body::Request => &described["request"],
        Body::Response(status) => &described["responses"][status],
    };
    assert!(schema.is_object(), "{operation} has no {body:?} schema");
    let root = json!({"$defs": schemas()["$defs"], "allOf": [schema]});
    let validator = jsonschema::validator_for(&root).unwrap_or_else(|e| panic!("{operation}: schema: {e}"));
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|error| format!("{operation} {body:?} at {}: {error}", error.instance_path()))
        .collect();
    if errors.is_empty() { Ok(()) } else { Err(errors) }
}

/// Checks that a redirect answer of `operation` is described, with the headers it carries.
pub fn validate_redirect(operation: &str, status: &str, headers: &[&str]) -> Result<(), Vec<String>> {
    let described = &schemas()["operations"][operation]["redirects"][status];
    let Some(required) = described.as_array() else {
        return Err(vec![format!("{operation} is not described as answering {status}")]);
    };
    let missing: Vec<String> = required
        .iter()
        .filter_map(Value::as_str)
        .filter(|name| !headers.iter().any(|h| h.eq_ignore_ascii_case(name)))
        .map(|name| format!("{operation} {status} lacks the header {name}"))
        .collect();
    if missing.is_empty() { Ok(()) } else { Err(missing) }
}
