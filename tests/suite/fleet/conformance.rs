//! The fleet fake's bodies against GitHub's published REST API description (the OpenAPI
//! document `@octokit/openapi` ships, kept beside the project in
//! `../shared/conformance/specs/github/`): every required field present, every field of the
//! documented type. OpenAPI 3.0's `nullable` is read as JSON Schema's `null` type.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::super::support::github_fleet::{
    BOT, commit, git_ref, issue, minimal_repository, public_user, pull_request, repository, simple_user,
    validation_error,
};

const SPEC_ID: &str = "https://api.github.com/openapi.json";

fn spec_path() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/conformance/specs/github/api.github.com.trimmed.json")
}

/// OpenAPI 3.0 `nullable: true` as JSON Schema: `null` is also allowed.
fn nullable_to_json_schema(schema: &mut Value) {
    match schema {
        Value::Object(object) => {
            for value in object.values_mut() {
                nullable_to_json_schema(value);
            }
            if object.remove("nullable") == Some(Value::Bool(true)) {
                let inner = Value::Object(std::mem::take(object));
                *object = json!({"anyOf": [{"type": "null"}, inner]})
                    .as_object()
                    .cloned()
                    .expect("an object");
            }
        }
        Value::Array(items) => items.iter_mut().for_each(nullable_to_json_schema),
        _ => {}
    }
}

/// Checks `body` against the component schema `name`; `None` when the description is absent.
fn errors(name: &str, body: &Value) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(spec_path()).ok()?;
    let mut spec: Value = serde_json::from_str(&text).expect("the description is JSON");
    nullable_to_json_schema(&mut spec);
    let registry = jsonschema::Registry::new()
        .add(SPEC_ID, spec)
        .expect("spec resource")
        .prepare()
        .expect("registry");
    let validator = jsonschema::options()
        .offline()
        .with_registry(&registry)
        .build(&json!({"$ref": format!("{SPEC_ID}#/components/schemas/{name}")}))
        .expect("schema builds");
    Some(
        validator
            .iter_errors(body)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect(),
    )
}

#[test]
fn the_fakes_bodies_match_the_published_api_description() {
    if !spec_path().is_file() {
        eprintln!("SKIP: the API description is not at {}", spec_path().display());
        return;
    }
    let bodies = [
        ("simple-user", simple_user(BOT, 1, "User")),
        ("public-user", public_user("acme", 2, "Organization")),
        (
            "minimal-repository",
            minimal_repository("acme/one", 3, &["upkeep"], false, false),
        ),
        ("repository", repository("acme/one", 3)),
        (
            "pull-request-simple",
            pull_request("acme/one", 4, "upkeep/x", "2024-01-01T00:00:00Z", "open"),
        ),
        (
            "pull-request-simple",
            pull_request("acme/one", 5, "upkeep/y", "2024-01-01T00:00:00Z", "closed"),
        ),
        (
            "issue",
            issue("acme/one", 6, 6, "A task", Some("body"), "alice", &["upkeep"]),
        ),
        ("issue", issue("acme/one", 7, 7, "No body", None, BOT, &[])),
        ("commit", commit("acme/one", &"a".repeat(40), &"b".repeat(40), &[])),
        ("git-ref", git_ref("acme/one", "refs/upkeep/dashboard", &"a".repeat(40))),
        ("validation-error", validation_error("Reference already exists")),
    ];
    for (name, body) in bodies {
        let found = errors(name, &body).expect("description present");
        assert!(found.is_empty(), "{name}: {found:#?}");
    }
    // The check can fail: a body missing a required field is reported.
    let mut incomplete = minimal_repository("acme/one", 3, &[], false, false);
    incomplete.as_object_mut().expect("object").remove("full_name");
    let found = errors("minimal-repository", &incomplete).expect("description present");
    assert!(found.iter().any(|e| e.contains("full_name")), "{found:#?}");
}
