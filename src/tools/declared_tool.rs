//! Declared command tools as [`Tool`]s: the schema the model sees and the call, over the
//! checked declaration of [`crate::exec::declared_command`] (templates, validation) and the runner.

use async_trait::async_trait;
use serde_json::{Map, json};

use super::run_shell_command::{command_spec, run_for_model};
use super::{RawInvocation, Tool, ToolClass, ToolError, ToolOutput, ToolSpec};
use crate::config::{ConfigError, DeclaredToolConfig};
use crate::exec::declared_command::Declaration;

#[derive(Debug)]
pub(crate) struct DeclaredTool {
    declaration: Declaration,
}

impl DeclaredTool {
    /// Checks a declaration; `origin` names the file in errors.
    pub(crate) fn new(config: &DeclaredToolConfig, origin: &str) -> Result<Self, ConfigError> {
        Ok(Self {
            declaration: Declaration::new(config, origin)?,
        })
    }

    pub(crate) fn name(&self) -> &str {
        &self.declaration.name
    }
}

#[async_trait]
impl Tool for DeclaredTool {
    fn spec(&self) -> ToolSpec {
        let mut properties = Map::new();
        let mut required = Vec::new();
        for parameter in &self.declaration.parameters {
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
        let declaration = &self.declaration;
        ToolSpec::new(
            &declaration.name,
            ToolClass::Dangerous,
            &format!("{} (runs `{}`)", declaration.description, declaration.program),
            json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false}),
        )
    }

    /// The operator declares the parameters, so they are only known at run time: the
    /// declaration checks the model's object itself ([`Declaration::build_args`]).
    async fn call(&self, call: RawInvocation<'_>) -> Result<ToolOutput, ToolError> {
        let RawInvocation { ctx, args: arguments } = call;
        let declaration = &self.declaration;
        let args = declaration
            .build_args(arguments)
            .map_err(|error| ToolError::model(error.to_string()))?;
        let spec = command_spec(&declaration.program, args, &declaration.env, ctx)?;
        run_for_model(&spec, ctx).await
    }
}
