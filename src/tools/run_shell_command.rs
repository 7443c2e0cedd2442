//! `run_shell_command` (dangerous; offered only with `--allow-dangerous-tools`): run `sh -c`
//! in the clone's root through [`crate::exec`]: the allowlisted environment, the sandbox, the
//! limits, a timeout after which every process the command started is killed, capped output
//! with known secrets redacted, and the lexical blocklist as a backstop.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{Invocation, ToolClass, ToolContext, ToolError, ToolOutput, ToolSpec, TypedTool};
use crate::exec::readable::readable_paths;
use crate::exec::{CommandSpec, SandboxPolicy, blocklist, command_environment, run};

pub(crate) struct RunShellCommand;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunShellCommandArgs {
    /// the shell command line
    command: String,
}

/// The environment, sandbox and limits every command tool runs with. Fails when the run set up
/// no sandbox plan (commands never run without one).
pub(crate) fn command_spec(
    program: &str,
    arguments: Vec<String>,
    declared_env: &[(String, String)],
    ctx: &ToolContext<'_>,
) -> Result<CommandSpec, ToolError> {
    let settings = ctx.commands;
    let plan = settings
        .sandbox
        .ok_or_else(|| ToolError::model("commands are not available: no sandbox was set up for this run"))?;
    // Commands write temporary files (TMPDIR) and their home's (HOME) into the private scratch
    // folder, which is writable in the sandbox and removed with the clone.
    let mut env = command_environment(&settings.pass_env, ctx.workspace.scratch());
    env.extend(declared_env.iter().cloned());
    Ok(CommandSpec {
        program: program.to_owned(),
        args: arguments,
        cwd: ctx.workspace.root().to_owned(),
        env,
        // History stays readable (`git log`, `git diff`) although the git directory is outside
        // the work tree (and read-only to the command): set by upkeep, after everything else.
        upkeep_env: ctx.workspace.git_env(),
        timeout: settings.timeout,
        output_cap: settings.output_cap,
        sandbox: Some(SandboxPolicy {
            writable: vec![ctx.workspace.root().to_owned(), ctx.workspace.scratch().to_owned()],
            // The system and toolchains, and of the machine's temporary space only the clone's
            // own history (read-only): its git directory and, for a local source, the object
            // directory it shares with the source.
            readable: readable_paths(
                &std::iter::once(ctx.workspace.git_dir().to_owned())
                    .chain(ctx.workspace.shared_objects())
                    .collect::<Vec<_>>(),
            ),
            plan,
            limits: settings.limits,
        }),
    })
}

/// Runs a prepared command and renders its result for the model, redacted.
pub(crate) async fn run_for_model(spec: &CommandSpec, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
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
impl TypedTool for RunShellCommand {
    type Args = RunShellCommandArgs;

    fn spec_with(&self, parameters: Value) -> ToolSpec {
        ToolSpec::new(
            "run_shell_command",
            ToolClass::Dangerous,
            "Run a shell command (sh -c) in the repository root, e.g. to build or test. No input is available; output is capped; long commands are killed at the timeout.",
            parameters,
        )
    }

    async fn run(&self, call: Invocation<'_, RunShellCommandArgs>) -> Result<ToolOutput, ToolError> {
        let Invocation { ctx, args } = call;
        let command = args.command.as_str();
        blocklist::check(command).map_err(ToolError::model)?;
        let spec = command_spec("sh", vec!["-c".into(), command.to_owned()], &[], ctx)?;
        run_for_model(&spec, ctx).await
    }
}
