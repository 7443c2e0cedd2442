//! `finish`: end the cycle, either with the task completed or with nothing left to do. Refused
//! while the clone holds changes no pull request of the cycle carries: finishing would drop
//! them with the clone.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{CycleEnd, FinishStatus, Invocation, ToolClass, ToolError, ToolOutput, ToolSpec, TypedTool};

/// Files named in the refusal at most; the rest are counted.
const MAX_NAMED_FILES: usize = 20;

pub(crate) struct Finish;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct FinishArgs {
    /// completed or no_tasks
    status: FinishStatus,
    /// one or two sentences on what was done
    summary: String,
}

#[async_trait]
impl TypedTool for Finish {
    type Args = FinishArgs;

    fn spec_with(&self, parameters: Value) -> ToolSpec {
        ToolSpec::new(
            "finish",
            ToolClass::Safe,
            "End the cycle. status `completed` after the task is done (pull request opened), or `no_tasks` when there is nothing to do.",
            parameters,
        )
    }

    async fn run(&self, call: Invocation<'_, FinishArgs>) -> Result<ToolOutput, ToolError> {
        let Invocation { ctx, args } = call;
        let FinishArgs { status, summary } = args;
        // Ending the cycle drops the clone: work no pull request carries would be lost.
        let unsaved = ctx
            .workspace
            .unsaved()
            .await
            .map_err(|error| ToolError::from_git(error, "checking the clone for unsaved changes"))?;
        if !unsaved.is_empty() {
            let mut files = unsaved
                .files
                .iter()
                .take(MAX_NAMED_FILES)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ");
            if unsaved.files.len() > MAX_NAMED_FILES {
                files.push_str(&format!(" and {} more", unsaved.files.len() - MAX_NAMED_FILES));
            }
            return Err(ToolError::model(format!(
                "the clone has changes no pull request of this cycle carries, and finishing would lose them: {files}. Propose them with create_pull_request, or undo them (write back each file's original content with write_file or edit_file); if you are unsure, ask a human with ask_question"
            )));
        }
        Ok(ToolOutput::EndCycle(CycleEnd::Finish { status, summary }))
    }
}
