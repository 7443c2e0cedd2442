//! `finish`: end the cycle, either with the task completed or with nothing left to do. Refused
//! while the clone holds changes no pull request of the cycle carries: finishing would drop
//! them with the clone.

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::{CycleEnd, FinishStatus, Tool, ToolClass, ToolContext, ToolError, ToolOutput, ToolSpec, args};

/// Files named in the refusal at most; the rest are counted.
const MAX_NAMED_FILES: usize = 20;

pub struct Finish;

#[async_trait]
impl Tool for Finish {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "finish",
            ToolClass::Safe,
            "End the cycle. status `completed` after the task is done (pull request opened), or `no_tasks` when there is nothing to do.",
            json!({
                "type": "object",
                "properties": {
                    "status": {"type": "string", "enum": ["completed", "no_tasks"], "description": "completed or no_tasks"},
                    "summary": {"type": "string", "description": "one or two sentences on what was done"},
                },
                "required": ["status", "summary"],
                "additionalProperties": false,
            }),
        )
    }

    async fn call(&self, arguments: &Map<String, Value>, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let status = match args::required_str(arguments, "status")? {
            "completed" => FinishStatus::Completed,
            "no_tasks" => FinishStatus::NoTasks,
            other => {
                return Err(ToolError::model(format!(
                    "status must be \"completed\" or \"no_tasks\", got {other:?}"
                )));
            }
        };
        let summary = args::optional_str(arguments, "summary")?.unwrap_or_default().to_owned();
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
