//! Declared command tools: a fixed program plus argument templates, checked and filled here.
//!
//! Why: a middle ground between safe mode and `run_shell_command`. The operator (`--config`)
//! or the repository (`.upkeep.toml`) declares a tool; there is no shell: each template is
//! either a literal argument or exactly `{{parameter}}`, which fills one whole argument, so a
//! value such as `x; touch pwned` stays one literal argument. Values are validated (type,
//! `enum`, `pattern`, `maxLength`) before anything runs, and string values may not start with
//! `-`, so a value can never turn into an option of the program. Whether a declared tool is
//! offered at all is the operator's decision (`--allow-tool NAME` or `--allow-dangerous-tools`,
//! see `tools::registry`); it then runs with the same runner and sandbox as `run_shell_command`.

use std::collections::BTreeMap;

use regex::Regex;
use serde_json::{Map, Value};

use crate::settings::{ConfigError, DeclaredToolConfig, ParameterConfig};

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
    "delegate",
    "complete_task",
];

/// A call's arguments that do not fit the declaration; the message is for the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct ArgumentError(pub String);

#[derive(Debug)]
pub(crate) struct Parameter {
    pub name: String,
    pub config: ParameterConfig,
    pattern: Option<Regex>,
}

#[derive(Debug)]
enum ArgTemplate {
    Literal(String),
    Parameter(String),
}

/// A checked declaration.
#[derive(Debug)]
pub(crate) struct Declaration {
    pub name: String,
    pub description: String,
    pub program: String,
    args: Vec<ArgTemplate>,
    /// The declaration's `env`, added to the allowlisted environment.
    pub env: Vec<(String, String)>,
    pub parameters: Vec<Parameter>,
}

fn template_parameter(arg: &str) -> Option<&str> {
    arg.strip_prefix("{{")
        .and_then(|rest| rest.strip_suffix("}}"))
        .map(str::trim)
}

impl Declaration {
    /// Checks a declaration; `origin` names the file in errors.
    pub(crate) fn new(config: &DeclaredToolConfig, origin: &str) -> Result<Self, ConfigError> {
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

    /// The argument value for `parameter`, validated; `None` for an optional one left out.
    fn value(&self, parameter: &Parameter, arguments: &Map<String, Value>) -> Result<Option<String>, ArgumentError> {
        let name = &parameter.name;
        let config = &parameter.config;
        let refuse = |message: String| Err(ArgumentError(message));
        let text = match (arguments.get(name), config.kind.as_str()) {
            (None | Some(Value::Null), _) if config.optional => return Ok(None),
            (None | Some(Value::Null), _) => return refuse(format!("missing required argument `{name}`")),
            (Some(Value::String(text)), "string") => {
                if text.starts_with('-') {
                    return refuse(format!(
                        "argument `{name}` may not start with `-` (it would be read as an option)"
                    ));
                }
                text.clone()
            }
            (Some(Value::Number(number)), "integer") if number.is_i64() => number.to_string(),
            (Some(Value::String(text)), "integer") if text.parse::<i64>().is_ok() => text.clone(),
            (Some(Value::Bool(flag)), "boolean") => flag.to_string(),
            (Some(_), kind) => return refuse(format!("argument `{name}` must be {kind}")),
        };
        if let Some(allowed) = &config.allowed {
            if !allowed.contains(&text) {
                return refuse(format!("argument `{name}` must be one of {allowed:?}, got {text:?}"));
            }
        }
        if let Some(max) = config.max_length {
            if text.chars().count() > max {
                return refuse(format!("argument `{name}` is longer than {max} characters"));
            }
        }
        if let Some(pattern) = &parameter.pattern {
            if !pattern.is_match(&text) {
                return refuse(format!(
                    "argument `{name}` does not match the pattern {:?}: {text:?}",
                    pattern.as_str()
                ));
            }
        }
        Ok(Some(text))
    }

    /// The program's arguments for a call, after every value is validated.
    pub(crate) fn build_args(&self, arguments: &Map<String, Value>) -> Result<Vec<String>, ArgumentError> {
        if let Some(unknown) = arguments
            .keys()
            .find(|key| !self.parameters.iter().any(|p| &p.name == *key))
        {
            return Err(ArgumentError(format!("unknown argument `{unknown}` for {}", self.name)));
        }
        let mut values = BTreeMap::new();
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

#[cfg(test)]
#[path = "declared_command_tests.rs"]
mod tests;
