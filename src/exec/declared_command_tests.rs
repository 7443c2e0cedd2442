use serde_json::json;

use super::*;

fn declared(toml_text: &str) -> Result<Declaration, ConfigError> {
    let file = crate::config::FileConfig::parse(toml_text, "test.toml")?;
    let tool = file.tools.first().ok_or_else(|| ConfigError("no tool".into()))?;
    Declaration::new(tool, "test.toml")
}

const CARGO_TEST: &str = r#"
[[tools]]
name = "cargo_test"
description = "Run the tests"
cmd = "cargo"
args = ["test", "{{filter}}"]
[tools.parameters.filter]
type = "string"
pattern = "^[A-Za-z0-9_:]*$"
maxLength = 20
optional = true
"#;

fn args(value: Value) -> Map<String, Value> {
    value.as_object().cloned().unwrap_or_default()
}

#[test]
fn templates_fill_whole_arguments_and_optional_ones_drop_out() {
    let tool = declared(CARGO_TEST).expect("valid");
    assert_eq!(
        tool.build_args(&args(json!({"filter": "core::x"}))).expect("ok"),
        ["test", "core::x"]
    );
    assert_eq!(tool.build_args(&args(json!({}))).expect("ok"), ["test"]);
}

#[test]
fn invalid_values_are_rejected_before_anything_runs() {
    let tool = declared(CARGO_TEST).expect("valid");
    for bad in [
        json!({"filter": "x; touch pwned"}),
        json!({"filter": "-Zunstable"}),
        json!({"filter": "a".repeat(21)}),
        json!({"filter": 3}),
        json!({"other": "x"}),
    ] {
        assert!(tool.build_args(&args(bad.clone())).is_err(), "{bad} must be refused");
    }
}

#[test]
fn declarations_are_checked() {
    let partial = CARGO_TEST.replace(
        r#"args = ["test", "{{filter}}"]"#,
        r#"args = ["test", "--filter={{filter}}"]"#,
    );
    assert!(declared(&partial).is_err(), "a template must fill a whole argument");
    let reserved = CARGO_TEST.replace("name = \"cargo_test\"", "name = \"write_file\"");
    assert!(declared(&reserved).is_err());
    let unknown = CARGO_TEST.replace("{{filter}}", "{{nope}}");
    assert!(declared(&unknown).is_err());
}
