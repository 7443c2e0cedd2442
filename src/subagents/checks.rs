//! Function validators: the operator's `checks` (declared command tools, e.g. the test suite)
//! run on the change before it is pushed, with no arguments, through the same runner and
//! sandbox as any declared tool. Each emits `check{tool, ok}`; a failing one's capped, redacted
//! output goes back to the model.

use serde_json::Map;

use super::level::Level;
use crate::events::Event;
use crate::tools::{Tool, ToolContext, ToolError};

/// A check that failed, with its output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FailedCheck {
    pub tool: String,
    pub output: String,
}

/// Runs every check (all of them, so the model learns every failure at once).
pub(super) async fn run(level: &Level<'_, '_>, ctx: &ToolContext<'_>) -> Result<Vec<FailedCheck>, ToolError> {
    let mut failed = Vec::new();
    for check in &level.team.checks {
        let tool = check.name().to_owned();
        let outcome = check.call(crate::tools::Invocation { ctx, args: &Map::new() }).await;
        let ok = match outcome {
            Ok(_) => true,
            Err(ToolError::RespondToModel(output)) => {
                failed.push(FailedCheck {
                    tool: tool.clone(),
                    output,
                });
                false
            }
            Err(fatal @ (ToolError::Fatal(_) | ToolError::Stopped(_))) => return Err(fatal),
        };
        level.emit(Event::Check { tool, ok });
    }
    Ok(failed)
}

/// What the model reads when checks failed and the pull request was held back.
pub(super) fn failure_message(failed: &[FailedCheck], round: u32, max_rounds: u32) -> String {
    let names: Vec<String> = failed.iter().map(|check| format!("`{}`", check.tool)).collect();
    let mut text = format!(
        "the check{} {} failed (round {round} of {max_rounds}), so nothing was committed or pushed; the change is still in the clone. Fix the cause and call create_pull_request again.",
        if failed.len() == 1 { "" } else { "s" },
        names.join(", ")
    );
    for check in failed {
        text.push_str(&format!("\n\nOutput of `{}`:\n{}", check.tool, check.output));
    }
    text
}
