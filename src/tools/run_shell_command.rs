//! `run_shell_command` (dangerous; offered only with `--allow-dangerous-tools`): run `sh -c`
//! in the clone's root with an allowlisted environment, stdin closed, a timeout that kills the
//! whole process group, capped output, known secrets redacted, a lexical blocklist as a
//! backstop, and Landlock filesystem confinement where the kernel has it.

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::exec::{CommandSpec, allowlisted_environment, run};
use super::sandbox::{SandboxKind, SandboxPolicy, probe};
use super::spec::object_schema;
use super::{Tool, ToolClass, ToolContext, ToolError, ToolOutput, ToolSpec, args, shell_guard};

pub struct RunShellCommand;

/// The environment, sandbox and limits every command tool runs with.
pub fn command_spec(
    program: &str,
    arguments: Vec<String>,
    extra_env: &[(String, String)],
    ctx: &ToolContext<'_>,
) -> CommandSpec {
    let mut env = allowlisted_environment(&ctx.commands.pass_env);
    // Commands write temporary files into the private scratch folder, which is confined with
    // the clone and removed with it.
    env.retain(|(name, _)| name != "TMPDIR");
    env.push(("TMPDIR".into(), ctx.workspace.scratch().display().to_string()));
    // History stays readable (`git log`, `git diff`) although the git directory is outside the
    // work tree, and read-only to the command.
    env.extend(ctx.workspace.git_env());
    env.extend(extra_env.iter().cloned());
    let sandbox = (probe() == SandboxKind::Landlock).then(|| SandboxPolicy {
        writable: vec![ctx.workspace.root().to_owned(), ctx.workspace.scratch().to_owned()],
    });
    CommandSpec {
        program: program.to_owned(),
        args: arguments,
        cwd: ctx.workspace.root().to_owned(),
        env,
        timeout: ctx.commands.timeout,
        output_cap: ctx.commands.output_cap,
        sandbox,
    }
}

/// Runs a prepared command and renders its result for the model, redacted.
pub async fn run_for_model(spec: &CommandSpec, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
    let output = run(spec, ctx.cancel)
        .await
        .map_err(|error| ToolError::model(format!("could not start `{}`: {error}", spec.program)))?;
    let text = ctx.redactor.redact(&output.render());
    if output.exit_code == Some(0) {
        Ok(ToolOutput::Text(text))
    } else {
        Err(ToolError::model(text))
    }
}

#[async_trait]
impl Tool for RunShellCommand {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "run_shell_command",
            ToolClass::Dangerous,
            "Run a shell command (sh -c) in the repository root, e.g. to build or test. No input is available; output is capped; long commands are killed at the timeout.",
            object_schema(&[("command", "string", "the shell command line", true)]),
        )
    }

    async fn call(&self, arguments: &Map<String, Value>, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let command = args::required_str(arguments, "command")?;
        shell_guard::check(command).map_err(ToolError::model)?;
        let spec = command_spec("sh", vec!["-c".into(), command.to_owned()], &[], ctx);
        run_for_model(&spec, ctx).await
    }
}
