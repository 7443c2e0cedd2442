//! `finish`: end the cycle, either with the task completed or with nothing left to do.

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::{CycleEnd, FinishStatus, Tool, ToolClass, ToolContext, ToolError, ToolOutput, ToolSpec, args};

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

    async fn call(&self, arguments: &Map<String, Value>, _ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
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
        Ok(ToolOutput::EndCycle(CycleEnd::Finish { status, summary }))
    }
}
