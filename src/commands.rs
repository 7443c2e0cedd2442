//! The `run` and `tools` subcommands, between clap and the library.

use std::io::Write;

use tokio_util::sync::CancellationToken;

use crate::agent::prompt::describe_tool;
use crate::cli::{RunArgs, ToolsArgs};
use crate::config::Config;
use crate::exit::ExitStatus;
use crate::tools::{ToolRegistry, ToolSelection, spec::reply_schema};

pub async fn run(args: &RunArgs, cancel: CancellationToken) -> ExitStatus {
    match Config::from_args(args) {
        Ok(config) => crate::orchestrator::run(config, cancel).await.status,
        Err(error) => {
            eprintln!("upkeep: {error}");
            ExitStatus::Usage
        }
    }
}

/// Prints the tools exactly as the model sees them: the same specs the prompt and the
/// structured-output schema are rendered from.
pub fn tools(args: &ToolsArgs) -> ExitStatus {
    let registry = ToolRegistry::new(
        &ToolSelection {
            dangerous: args.allow_dangerous_tools,
        },
        Vec::new(),
    );
    let specs = registry.specs();
    let text = if args.json {
        let value = serde_json::json!({"tools": specs, "reply_schema": reply_schema(&specs)});
        serde_json::to_string_pretty(&value).unwrap_or_default()
    } else {
        specs.iter().map(describe_tool).collect::<Vec<_>>().join("\n\n")
    };
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (`upkeep tools | head`) is not an error.
    let _ = writeln!(stdout, "{text}");
    ExitStatus::Done
}
