//! Declared command tools: a middle ground between safe mode and `run_shell_command`.
//!
//! The operator (`--config`) or the repository (`.upkeep.toml`) declares a tool as a fixed
//! program plus argument templates. There is no shell: each template is either a literal
//! argument or exactly `{{parameter}}`, which fills one whole argument, so a value such as
//! `x; touch pwned` stays one literal argument. Values are validated (type, `enum`, `pattern`,
//! `maxLength`) before anything runs, and string values may not start with `-`, so a value can
//! never turn into an option of the program. A declared tool is offered only when the operator
//! allows it (`--allow-tool NAME` or `--allow-dangerous-tools`): a repository cannot grant
//! itself the right to run code. It runs with the same environment allowlist, timeout, output
//! cap, redaction and sandbox as `run_shell_command`.

use async_trait::async_trait;
use regex::Regex;
use serde_json::{Map, Value, json};

use super::run_shell_command::{command_spec, run_for_model};
use super::{Tool, ToolClass, ToolContext, ToolError, ToolOutput, ToolSpec};
use crate::config::{ConfigError, DeclaredToolConfig, ParameterConfig};

/// Names the built-in tools use; a declared tool may not shadow them.
const RESERVED: &[&str] = &[
    "read_file",
    "list_files",
    "search_files",
    "write_file",
    "edit_file",
    "create_pull_request",
    "ask_question",
    "finish",
    "run_shell_command",
];

#[derive(Debug)]
struct Parameter {
    name: String,
    config: ParameterConfig,
    pattern: Option<Regex>,
}

#[derive(Debug)]
enum ArgTemplate {
    Literal(String),
    Parameter(String),
}

#[derive(Debug)]
pub struct DeclaredTool {
    name: String,
    description: String,
    program: String,
    args: Vec<ArgTemplate>,
    env: Vec<(String, String)>,
    parameters: Vec<Parameter>,
}

fn template_parameter(arg: &str) -> Option<&str> {
    arg.strip_prefix("{{")
        .and_then(|rest| rest.strip_suffix("}}"))
        .map(str::trim)
}

impl DeclaredTool {
    /// Checks a declaration; `origin` names the file in errors.
    pub fn new(config: &DeclaredToolConfig, origin: &str) -> Result<Self, ConfigError> {
        let fail = |problem: String| ConfigError(format!("{origin}: [[tools]] `{}`: {problem}", config.name));
        let valid_name = !config.name.is_empty()
            && config.name.len() <= 64
            && config
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid_name {
            return Err(fail("`name` must be 1-64 letters, digits, `_` or `-`".into()));
        }
        if RESERVED.contains(&config.name.as_str()) {
            return Err(fail("`name` is a built-in tool's name".into()));
        }
        if config.cmd.trim().is_empty() {
            return Err(fail("`cmd` is empty".into()));
        }
        let mut parameters = Vec::new();
        for (name, parameter) in &config.parameters {
            if !matches!(parameter.kind.as_str(), "string" | "integer" | "boolean") {
                return Err(fail(format!(
                    "parameter `{name}`: `type` must be string, integer or boolean"
                )));
            }
            let pattern = parameter
                .pattern
                .as_deref()
                .map(Regex::new)
                .transpose()
                .map_err(|error| fail(format!("parameter `{name}`: invalid `pattern`: {error}")))?;
            parameters.push(Parameter {
                name: name.clone(),
                config: parameter.clone(),
                pattern,
            });
        }
        let mut args = Vec::new();
        for arg in &config.args {
            match template_parameter(arg) {
                Some(name) if parameters.iter().any(|p| p.name == name) => {
                    args.push(ArgTemplate::Parameter(name.to_owned()))
                }
                Some(name) => {
                    return Err(fail(format!(
                        "argument template `{arg}` names no declared parameter `{name}`"
                    )));
                }
                None if arg.contains("{{") => {
                    return Err(fail(format!(
                        "argument `{arg}`: a template must fill a whole argument (write \"{{{{name}}}}\" as its own argument)"
                    )));
                }
                None => args.push(ArgTemplate::Literal(arg.clone())),
            }
        }
        for parameter in &parameters {
            if !args
                .iter()
                .any(|a| matches!(a, ArgTemplate::Parameter(name) if *name == parameter.name))
            {
                return Err(fail(format!("parameter `{}` is used by no argument", parameter.name)));
            }
        }
        Ok(Self {
            name: config.name.clone(),
            description: config.description.clone(),
            program: config.cmd.clone(),
            args,
            env: config.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            parameters,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The argument value for `parameter`, validated; `None` for an optional one left out.
    fn value(&self, parameter: &Parameter, arguments: &Map<String, Value>) -> Result<Option<String>, ToolError> {
        let name = &parameter.name;
        let config = &parameter.config;
        let text = match (arguments.get(name), config.kind.as_str()) {
            (None | Some(Value::Null), _) if config.optional => return Ok(None),
            (None | Some(Value::Null), _) => {
                return Err(ToolError::model(format!("missing required argument `{name}`")));
            }
            (Some(Value::String(text)), "string") => {
                if text.starts_with('-') {
                    return Err(ToolError::model(format!(
                        "argument `{name}` may not start with `-` (it would be read as an option)"
                    )));
                }
                text.clone()
            }
            (Some(Value::Number(number)), "integer") if number.is_i64() => number.to_string(),
            (Some(Value::String(text)), "integer") if text.parse::<i64>().is_ok() => text.clone(),
            (Some(Value::Bool(flag)), "boolean") => flag.to_string(),
            (Some(_), kind) => return Err(ToolError::model(format!("argument `{name}` must be {kind}"))),
        };
        if let Some(allowed) = &config.allowed {
            if !allowed.contains(&text) {
                return Err(ToolError::model(format!(
                    "argument `{name}` must be one of {allowed:?}, got {text:?}"
                )));
            }
        }
        if let Some(max) = config.max_length {
            if text.chars().count() > max {
                return Err(ToolError::model(format!(
                    "argument `{name}` is longer than {max} characters"
                )));
            }
        }
        if let Some(pattern) = &parameter.pattern {
            if !pattern.is_match(&text) {
                return Err(ToolError::model(format!(
                    "argument `{name}` does not match the pattern {:?}: {text:?}",
                    pattern.as_str()
                )));
            }
        }
        Ok(Some(text))
    }

    /// The program's arguments for a call, after every value is validated.
    pub fn build_args(&self, arguments: &Map<String, Value>) -> Result<Vec<String>, ToolError> {
        if let Some(unknown) = arguments
            .keys()
            .find(|key| !self.parameters.iter().any(|p| &p.name == *key))
        {
            return Err(ToolError::model(format!(
                "unknown argument `{unknown}` for {}",
                self.name
            )));
        }
        let mut values = std::collections::BTreeMap::new();
        for parameter in &self.parameters {
            values.insert(parameter.name.as_str(), self.value(parameter, arguments)?);
        }
        Ok(self
            .args
            .iter()
            .filter_map(|arg| match arg {
                ArgTemplate::Literal(text) => Some(text.clone()),
                ArgTemplate::Parameter(name) => values.get(name.as_str()).cloned().flatten(),
            })
            .collect())
    }
}

#[async_trait]
impl Tool for DeclaredTool {
    fn spec(&self) -> ToolSpec {
        let mut properties = Map::new();
        let mut required = Vec::new();
        for parameter in &self.parameters {
            let config = &parameter.config;
            let mut schema = json!({"type": config.kind});
            if let Some(description) = &config.description {
                schema["description"] = json!(description);
            }
            if let Some(allowed) = &config.allowed {
                schema["enum"] = json!(allowed);
            }
            if let Some(pattern) = &config.pattern {
                schema["pattern"] = json!(pattern);
            }
            if let Some(max) = config.max_length {
                schema["maxLength"] = json!(max);
            }
            if !config.optional {
                required.push(parameter.name.clone());
            }
            properties.insert(parameter.name.clone(), schema);
        }
        ToolSpec::new(
            &self.name,
            ToolClass::Dangerous,
            &format!("{} (runs `{}`)", self.description, self.program),
            json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false}),
        )
    }

    async fn call(&self, arguments: &Map<String, Value>, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let args = self.build_args(arguments)?;
        let spec = command_spec(&self.program, args, &self.env, ctx);
        run_for_model(&spec, ctx).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declared(toml_text: &str) -> Result<DeclaredTool, ConfigError> {
        let file = crate::config::FileConfig::parse(toml_text, "test.toml")?;
        DeclaredTool::new(&file.tools[0], "test.toml")
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
}
